from ktinfra.cli import main

main()
