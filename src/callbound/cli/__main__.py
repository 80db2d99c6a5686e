from callbound.cli.app import main

main()
