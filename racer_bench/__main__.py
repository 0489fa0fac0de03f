from racer_bench.cli import main

main()
