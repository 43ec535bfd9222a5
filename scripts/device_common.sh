# Sourced by the scripts/device_*.sh that run on the GPU machine, from the repo root (or a copy of it
# two levels below the checkout that carries the wheels, as .dev/NAME):
#   - the environment: unbuffered output, tracer's cache in /tmp, PYTHONPATH on this tree;
#   - the carried wheels (.whl: nvtx, cupti-python, defusedxml, ncu-report; .dwh/.jswheels:
#     jsonschema; .nsysw: drgn), here or two levels up, installed into /tmp/site;
#   - run_one NAME LIMIT CMD...: CMD under the call's deadline END (seconds since the epoch), its
#     log in $OUT/logs/NAME.log, its exit status and seconds in $OUT/logs/exits.txt.
export PYTHONUNBUFFERED=1 TRACER_CACHE_DIR=/tmp/tracer-cache
export PYTHONPATH=$PWD
device_wheels() {
  local base wheels=()
  for base in . ../..; do
    wheels+=($(ls "$base"/.whl/*.whl "$base"/.dwh/.jswheels/*.whl "$base"/.nsysw/*.whl 2>/dev/null))
    [ ${#wheels[@]} -gt 0 ] && break
  done
  [ ${#wheels[@]} -eq 0 ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${wheels[@]}" 2>&1 | tail -2
  export PYTHONPATH=$PWD:/tmp/site
}
run_one() {  # name timeout cmd...
  local name=$1 limit=$2; shift 2
  local left=$(( END - $(date +%s) ))
  if [ "$left" -lt 10 ]; then echo "$name skipped" >> "$OUT/logs/exits.txt"; return; fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/logs/$name.log" 2>&1
  echo "$name $? $(( $(date +%s) - t0 ))s" >> "$OUT/logs/exits.txt"
}
device_wheels
