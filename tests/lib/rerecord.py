#!/usr/bin/env python3
"""rerecord.py SRC DST: tones.py's tone0..2.wav of SRC written again to DST
with every sample one step up: the same lengths and words, other recordings
(a feature file whose content differs while its shape does not)."""
import sys
import wave

src, dst = sys.argv[1], sys.argv[2]
for k in range(3):
    with wave.open(f"{src}/tone{k}.wav") as r:
        p, x = r.getparams(), bytearray(r.readframes(r.getnframes()))
    for i in range(0, len(x), 2):
        v = int.from_bytes(x[i:i + 2], "little", signed=True)
        x[i:i + 2] = max(-32768, min(32767, v + 1)).to_bytes(2, "little", signed=True)
    with wave.open(f"{dst}/tone{k}.wav", "wb") as w:
        w.setparams(p)
        w.writeframes(bytes(x))
