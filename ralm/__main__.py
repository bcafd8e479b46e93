from ralm.cli.main import main

main()
