"""One pass from records to every per-connection table (`tabulate`), with connections carried in
from the run before and out to the next (`carry`) in saved states (`state`: blob framing, the
continuity check, the safe unpickler; each class saves its own fields)."""
