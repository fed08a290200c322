#!/bin/sh
# The offline demo: a scripted model edits, creates, moves and deletes files in a copy of
# ./workspace, shiro shows every diff, then /undo puts everything back byte for byte.
# No network and no API key are needed: the model is the replay script in ./script.json.
set -e
cd "$(dirname "$0")/../.."
exec cargo run --release -p shiro-cli -- demo "$@"
