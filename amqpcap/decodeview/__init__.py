"""The views of `amqpcap decode`: records filtered (`filters`, `where`), put in time order
(`order`), connections' ends followed (`ends`), rendered as readable lines (`readable`) or as JSON
Lines (`jsonl`). Hot modules (amqpcap.HOT_MODULES): compiled where a C compiler was there."""
