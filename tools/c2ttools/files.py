"""JSON files as the pipelines write them: run logs and configs (read_log,
write_json) and question sets, one JSON object a line (read_jsonl, write_jsonl).

Byte-level contract, so that a rerun writes the same bytes: write_json writes
json.dump(obj, indent=indent) and then `end` ("\\n" unless the caller's files never
had it); write_jsonl writes json.dumps(row, ensure_ascii=ensure_ascii) and "\\n" per
row, UTF-8."""
import json


def read_log(path):
    """The JSON object in path, or {} when there is no such file yet (a first run)."""
    if not path.exists():
        return {}
    with open(path) as f:
        return json.load(f)


def write_json(path, obj, indent=1, end="\n"):
    with open(path, "w") as f:
        json.dump(obj, f, indent=indent)
        f.write(end)


def read_jsonl(path):
    """The objects of a JSON-lines file; blank lines are skipped."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path, rows, ensure_ascii=False):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=ensure_ascii) + "\n")
