from rap_benchmark.cli import main

raise SystemExit(main())
