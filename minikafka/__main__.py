from minikafka.cli import main

raise SystemExit(main())
