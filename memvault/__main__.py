from memvault.faces.cli import main

main()
