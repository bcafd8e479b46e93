"""The command machinery: the command table (``commands``), the dispatcher (``main``), typed signatures as
parsers (``command_args``) and typed calls as command lines (``command_render``)."""
