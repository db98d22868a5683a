from memvault.cli import main

main()
