"""Splits the bible program's dump ("Ge1:1 In the beginning ...", one verse a line) into
chapters: one verse a line without its reference, chapters separated by a blank line.
Every 40th chapter (index % 40 == 20) goes to the validation file.

    python3 kjv_clean.py kjv_raw.txt kjv_train.txt kjv_valid.txt
"""
import re
import sys

REF = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+)$")


def read_chapters(path):
    chapters = []  # list of lists of verses
    current_key = None
    with open(path, encoding="ascii") as f:
        for line_no, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            ref, _, text = line.partition(" ")
            m = REF.match(ref)
            if not m or not text.strip():
                raise SystemExit(f"{path}:{line_no}: expected 'BookC:V text', got {line[:60]!r}")
            key = (m.group(1), int(m.group(2)))
            if key != current_key:
                chapters.append([])
                current_key = key
            chapters[-1].append(" ".join(text.split()))
    return chapters


def main():
    raw, train_path, valid_path = sys.argv[1:4]
    chapters = read_chapters(raw)
    train = [c for i, c in enumerate(chapters) if i % 40 != 20]
    valid = [c for i, c in enumerate(chapters) if i % 40 == 20]
    for path, part in ((train_path, train), (valid_path, valid)):
        with open(path, "w", encoding="ascii") as f:
            f.write("\n\n".join("\n".join(c) for c in part) + "\n")
    n_verses = sum(len(c) for c in chapters)
    print(f"{len(chapters)} chapters, {n_verses} verses: {len(train)} train, {len(valid)} valid chapters")


if __name__ == "__main__":
    main()
