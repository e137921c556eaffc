#!/usr/bin/env python3
"""tones.py - three noisy one-second tones (16 kHz, 16-bit mono WAV), the
real audio the fault and verify tests send through `dstrain prep`, and
their manifest ok.csv ("toneK.wav,hello world").

usage: tones.py DIR
"""
import math
import random
import struct
import sys
import wave

out = sys.argv[1]
random.seed(5)
for k in range(3):
    with wave.open(f"{out}/tone{k}.wav", "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"".join(
            struct.pack("<h", int(8000 * math.sin(2 * math.pi * (220 + 50 * k) * i / 16000))
                        + random.randint(-300, 300)) for i in range(16000)))
with open(f"{out}/ok.csv", "w") as f:
    f.write("".join(f"tone{k}.wav,hello world\n" for k in range(3)))
