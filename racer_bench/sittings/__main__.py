"""``python -m racer_bench.sittings table=<table> sitting=<i>`` (``-m sitting=0,1,2``)."""

from racer_bench.sittings.job import main

main()
