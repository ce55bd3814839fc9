"""The first prompt each real agent CLI sends, in the embedded model's tokens.

Each CLI runs one headless request against ``skillgrad serve`` (a scripted model that answers
at once) in a network namespace of its own (``unshare -rn``: loopback only), set up by
:mod:`skillgrad.models.agent_clis`; the server journals every call (``--record``). The CLI's
first call with tools (its system prompt, tool list and the request) is then rendered with the
embedded model's own chat template, tools included, and counted with its tokenizer: what the
embedded model's window (``n_ctx``) must hold, and what it reads before its first token.

    python bench/agent_prompts.py --clis "$(ls -d DIR/*/node_modules/.bin | paste -sd:)"
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.weights import DEFAULT_MODEL, locate

PORT = 8401
REQUEST = "How many files are in this folder?"


def first_request(name: str, binary: str, scratch: Path) -> dict[str, Any]:
    """The first request with tools that ``name`` sent (as journaled by the server)."""
    agent = AGENT_CLIS[name]
    home, work, record = scratch / "home", scratch / "work", scratch / "calls"
    work.mkdir(parents=True)
    config = scratch / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "default": "Two files."}}}))
    env = agent.prepare(home, f"http://127.0.0.1:{PORT}/r/{name}")
    serve = shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                        "--port", str(PORT), "--record", str(record)])
    script = f"""
        ip link set lo up
        {serve} > {scratch}/serve.out 2> {scratch}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {scratch}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join(agent.command(binary, REQUEST))} < /dev/null > /dev/null 2>&1
        kill -INT $server; wait $server
    """
    subprocess.run(["unshare", "-rn", "bash", "-c", script], capture_output=True, text=True,
                   timeout=240, env={**os.environ, **env}, check=False)
    calls = record / name / "calls.jsonl"
    if not calls.exists():
        raise SystemExit(f"{name}: the server journaled no call ({scratch}/serve.err)")
    for line in calls.read_text(encoding="utf-8").splitlines():
        request: dict[str, Any] = json.loads(line)["request"]
        if request.get("tools"):
            return request
    raise SystemExit(f"{name}: no call with tools")


class Counter:
    """The embedded model's tokenizer and chat template (the weights are not loaded)."""

    def __init__(self) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self.llama = Llama(model_path=str(locate(DEFAULT_MODEL)), vocab_only=True, verbose=False)
        metadata = self.llama.metadata
        eos = self.llama.detokenize([self.llama.token_eos()]).decode("utf-8", "replace")
        self.format = Jinja2ChatFormatter(metadata["tokenizer.chat_template"], eos_token=eos,
                                          bos_token="")

    def tokens(self, request: dict[str, Any]) -> int:
        messages = [{"role": m["role"], "content": _text(m.get("content", ""))}
                    for m in request["messages"]]
        prompt = self.format(messages=messages, tools=request["tools"]).prompt
        return len(self.llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))


def version(binary: str) -> str:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=False)
    return (proc.stdout or proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clis", default=os.environ.get("SKILLGRAD_AGENT_CLIS", ""),
                        help="folders holding the CLIs, ':'-separated")
    parser.add_argument("--only", default=",".join(AGENT_CLIS), help="agents, ','-separated")
    args = parser.parse_args()
    counter = Counter()
    print("| CLI | version | tools | first prompt (tokens) |\n|---|---|---|---|")
    for name in args.only.split(","):
        binary = shutil.which(AGENT_CLIS[name].binary, path=args.clis)
        if binary is None:
            raise SystemExit(f"{name}: not found in --clis")
        with tempfile.TemporaryDirectory() as scratch:
            request = first_request(name, binary, Path(scratch))
        print(f"| {name} | {version(binary)} | {len(request['tools'])} | "
              f"{counter.tokens(request):,} |", flush=True)


if __name__ == "__main__":
    main()
