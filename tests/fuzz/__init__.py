"""The fuzz suite: amqpcap's decoder on inputs it was never shown, with properties that hold for all.

Three targets, each fuzzed with hypothesis on mutants of the real samples (mutators.py):

- the codec (test_codec_fuzz.py): `decode_frame` on mutated real frames, generated frames with
  field tables of random tags, lengths and nesting, and random bytes. Only the typed DecodeErrors
  escape; an accepted frame re-checks; its fields render as `amqpcap decode` renders them.
- the stream decoder (test_stream_fuzz.py): mutated TCP segment sequences and mutated captures
  through the whole CaptureDecoder. No exception; every record follows the JSON Lines contract
  (docs/decode.md); per connection and direction stream_bytes == decoded_bytes + skipped_bytes;
  what a mutation cannot have touched is still decoded (or, for mutations that leave the streams
  as they were, the decode is the same); damage that must be reported is.
- the capture reader (test_reader_fuzz.py): mutated files. Only CaptureError escapes, and only
  before the first record; a clean read is exactly what the file literally holds (oracles.py
  parses it independently); untouched records are still read; the info adds up; byte ranges read
  as the whole file.

For every example: a time limit (a hang fails the test with the input saved) and a memory bound
(tracemalloc, sampled), see harness.py. atheris_codec.py and atheris_reader.py are coverage-guided
harnesses of the first and third targets, run for a few seconds by test_atheris.py and by hand for
as long as you like. corpus/ keeps tiny inputs that once failed, replayed by test_corpus.py, which
also pins every finding not yet fixed with a strict xfail test (corpus/README.md lists them); the
fuzz tests recognise those findings (known.py) and go on looking for others.

Running it:

    pytest tests/fuzz                        # CI budget: about 1.5 minutes, the same examples every run
                                             # (make test: also its quick part with AMQPCAP_INTERPRETED=1)
    pytest tests/fuzz -m "not slow"          # the quick loop's part: each fuzz test's [smoke] variant
                                             # (an eighth of its examples) and the corpus, ~10 s
    AMQPCAP_FUZZ_SECONDS=1800 pytest tests/fuzz      # half an hour, randomized, split between the tests
    python tests/fuzz/atheris_codec.py -max_total_time=600     # ten minutes of libFuzzer on the codec
    python tests/fuzz/atheris_reader.py -max_total_time=600    # ... on the capture reader

The CI budget is derandomized (hypothesis derives its examples from each test's name, with no
database): a red run is red again on rerun. With AMQPCAP_FUZZ_SECONDS each test keeps starting new
randomized hypothesis runs until its share of the time is spent (codec 20 %, reader 25 %, segments
20 %, captures 20 %, each atheris harness 7.5 %); failures are remembered in .hypothesis/fuzz and
replayed first next time. Other knobs: AMQPCAP_FUZZ_EXAMPLE_SECONDS (time limit per example,
default 10), AMQPCAP_FUZZ_MEMORY_EVERY (trace memory every n-th example, default 5),
AMQPCAP_FUZZ_ARTIFACTS (where failing inputs go, default .fuzz-artifacts/).

The suite calls only public entry points of whatever amqpcap is installed (pure Python or
compiled) and patches nothing in it; pytest's header names the build fuzzed, and test_build.py
fails on a compiled module older than its source (an edited .py not rebuilt: pip install -e .).
"""
