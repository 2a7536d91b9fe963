#!/usr/bin/env bash
# A stand-in for nvidia-smi on the loopback "nodes" of the live tests (bash >= 5).
#
# It answers `--query-gpu=F1,F2,... --format=csv[,noheader][,nounits] [-lms N | -l N]` for
# $FAKE_NVSMI_GPUS GPUs (default 4), honouring the field order, aliases (clocks.sm ->
# clocks.current.sm, ...) and the format flags. Values are those of a real H100 80GB HBM3 under
# load (tests/data/live/h100-load.query-gpu.csv, captured by utkuozdemir/nvidia_gpu_exporter),
# except three columns that make rows tell apart and checkable:
#   index = the GPU number, timestamp = now,
#   power.draw = captured value + GPU number + $FAKE_NVSMI_NODE (W).
# Control files in $FAKE_NVSMI_CONTROL (a directory): `stall` pauses output while it exists
# (a stream that goes silent); `fail` makes it exit with status 3 and a message on stderr; `lost`
# (holding a GPU number) prints, in that GPU's place, the line a real nvidia-smi prints for a GPU that
# fell off the bus; `garbage` prints lines that are no rows at all (a babbling stream).
# An unknown field is refused as the real one does: `Field "x" is not a valid field to query.`
set -u
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
data=${FAKE_NVSMI_DATA:-$here/../data/live/h100-load.query-gpu.csv}
aliases=${FAKE_NVSMI_ALIASES:-$here/../data/live/h100-query-gpu-aliases.txt}
gpus=${FAKE_NVSMI_GPUS:-4}
node=${FAKE_NVSMI_NODE:-0}
control=${FAKE_NVSMI_CONTROL:-/nonexistent}

query="" format="csv" interval_ms=""
while (($#)); do
    case $1 in
        --query-gpu=*) query=${1#*=} ;;
        --query-gpu) shift; query=${1-} ;;
        --format=*) format=${1#*=} ;;
        --format) shift; format=${1-} ;;
        -lms) shift; interval_ms=${1-} ;;
        --loop-ms=*) interval_ms=${1#*=} ;;
        -l) shift; interval_ms=$(( ${1-1} * 1000 )) ;;
        --loop=*) interval_ms=$(( ${1#*=} * 1000 )) ;;
        -L|--list-gpus)
            for ((g = 0; g < gpus; g++)); do echo "GPU $g: NVIDIA H100 80GB HBM3 (UUID: GPU-0000000$g-0000-0000-0000-000000000000)"; done
            exit 0 ;;
        *) echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2; exit 2 ;;
    esac
    shift
done
if [[ -z $query ]]; then
    echo "fake nvidia-smi: only --query-gpu is implemented" >&2
    exit 2
fi
if [[ -n $interval_ms && ! $interval_ms =~ ^[0-9]+$ ]]; then
    echo "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help." >&2
    exit 2
fi

# The capture: "name [unit]" columns and their values, both ", "-separated.
declare -A unit_of value_of canonical
{ IFS= read -r header_line; IFS= read -r value_line; } < "$data"
readarray -t header_cols <<< "${header_line//, /$'\n'}"
readarray -t value_cols <<< "${value_line//, /$'\n'}"
for i in "${!header_cols[@]}"; do
    col=${header_cols[$i]}
    name=${col%% \[*}
    unit=""
    [[ $col == *" ["*"]" ]] && unit=${col##* \[} && unit=${unit%\]}
    unit_of[$name]=$unit
    value_of[$name]=${value_cols[$i]}
done
while IFS= read -r line; do
    [[ $line =~ ^\"([^\"]+)\"\ or\ \"([^\"]+)\"$ ]] || continue
    canonical[${BASH_REMATCH[2]}]=${BASH_REMATCH[1]}
done < "$aliases"

IFS=',' read -r -a fields <<< "$query"
names=()
for field in "${fields[@]}"; do
    field=${field// /}
    name=${canonical[$field]-$field}
    if [[ -z ${value_of[$name]+set} ]]; then
        echo "Field \"$field\" is not a valid field to query." >&2
        exit 2
    fi
    names+=("$name")
done
noheader=0 nounits=0
[[ $format == *noheader* ]] && noheader=1
[[ $format == *nounits* ]] && nounits=1

render() {  # render NAME GPU TIMESTAMP -> $cell
    local name=$1 g=$2 ts=$3 v unit
    unit=${unit_of[$name]}
    case $name in
        timestamp) cell=$ts; return ;;
        index) cell=$g; return ;;
        count) cell=$gpus; return ;;
        power.draw)
            v=${value_of[$name]% W}
            v=$(( ${v%.*} + g + node )).${v#*.}
            [[ $nounits == 1 ]] && cell=$v || cell="$v W"
            return ;;
    esac
    v=${value_of[$name]}
    if [[ $nounits == 1 && -n $unit && $v == *" $unit" ]]; then v=${v% "$unit"}; fi
    cell=$v
}

if [[ $noheader == 0 ]]; then
    out=()
    for name in "${names[@]}"; do
        unit=${unit_of[$name]}
        if [[ -n $unit && $nounits == 0 ]]; then out+=("$name [$unit]"); else out+=("$name"); fi
    done
    (IFS=','; line="${out[*]}"; printf '%s\n' "${line//,/, }")
fi

while true; do
    if [[ -e $control/fail ]]; then
        echo "Unable to determine the device handle for GPU0000:00:09.0: GPU is lost." >&2
        exit 3
    fi
    if [[ ! -e $control/stall ]]; then
        now=$EPOCHREALTIME  # one reading for seconds and milliseconds
        printf -v ts '%(%Y/%m/%d %H:%M:%S)T' "${now%.*}"
        ms=${now#*.}
        ts="$ts.${ms:0:3}"
        block=""
        lost=-1
        [[ -e $control/lost ]] && lost=$(< "$control/lost")
        for ((g = 0; g < gpus; g++)); do
            if [[ -e $control/garbage ]]; then
                block+="#&%!? $RANDOM ~~ not a row ~~"$'\n'
                continue
            fi
            if ((g == lost)); then
                block+="Unable to determine the device handle for GPU 0000:0$((g + 1)):00.0: Unknown Error"$'\n'
                continue
            fi
            row=""
            for name in "${names[@]}"; do
                render "$name" "$g" "$ts"
                row+="${row:+, }$cell"
            done
            block+="$row"$'\n'
        done
        printf '%s' "$block"
    fi
    [[ -z $interval_ms ]] && exit 0
    sleep "$((interval_ms / 1000)).$(printf '%03d' $((interval_ms % 1000)))"
done
