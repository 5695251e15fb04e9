from ctxlab.cli import main

main()
