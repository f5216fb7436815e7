"""What the hand-run checks of bench/ (tokenizer_differential.py, prompt_differential.py,
png_pillow_check.py) share: exit status 2 for a broken setup, the provenance fields and the
writing of their results JSON, and the per-category count table of the two differential checks."""
import json, os, subprocess, sys

def setup_error(message):
    """A broken setup is exit status 2, told apart from disagreements (1)."""
    print(f"{os.path.basename(sys.argv[0])}: {message}", file=sys.stderr)
    sys.exit(2)

def run_main(main):
    """Exits with main()'s status; a process that fails to run or a file that cannot be written is
    a broken setup."""
    try:
        sys.exit(main())
    except (subprocess.CalledProcessError, OSError) as e:
        setup_error(str(e))

def stepmix_version(binary):
    return subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()

def source_commit():
    """The commit of this checkout, marked -dirty when it has uncommitted changes."""
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run(["git", "-C", here, "describe", "--always", "--dirty", "--abbrev=7"],
                          capture_output=True, text=True).stdout.strip() or "unknown"

def npm_package(peer_script, name):
    """'@huggingface/NAME VERSION' as installed next to the peer script."""
    package = os.path.join(os.path.dirname(peer_script), "node_modules", "@huggingface", name, "package.json")
    return f"@huggingface/{name} " + json.load(open(package))["version"]

def stage_seconds(stamps, digits=1):
    """[(stage, monotonic time), ...] -> {stage: seconds since the previous stamp}."""
    return {b[0]: round(b[1] - a[1], digits) for a, b in zip(stamps, stamps[1:])}

def count_table(counts, keys, width):
    """Prints {category: {key: n}} with a total row (keys as headers, '_' as '-') and returns the total."""
    total = {k: sum(c[k] for c in counts.values()) for k in keys}
    labels = [k.replace("_", "-") for k in keys]
    print(f"{'category':{width}}" + "".join(f" {label:>{len(label) + 1}}" for label in labels))
    for name, c in list(counts.items()) + [("total", total)]:
        print(f"{name:{width}}" + "".join(f" {c[k]:{len(label) + 1}}" for k, label in zip(keys, labels)))
    return total

def write_result(path, result):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"wrote {path}")
