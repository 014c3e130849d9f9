from conq.cli import main

main()
