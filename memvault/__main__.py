from memvault.faces.warm import main

main()
