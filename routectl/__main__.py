from routectl.cli import main

main()
