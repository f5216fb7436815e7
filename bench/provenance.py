"""What a bench check's results JSON records about the code and peers it ran: shared by
bench/tokenizer_differential.py and bench/prompt_differential.py."""
import json, os, subprocess

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
