# Writes a valid summary of many runs, about SIZE_MB MB, from a summary of one run (cmake
# -DSUMMARY=one_run.json -DSIZE_MB=40 -DOUT=large.json -P make_large_summary.cmake): under the bound
# on a summary's size, but its JSON tree takes more memory than a test's `ulimit -v` leaves.
file(READ "${SUMMARY}" one)
string(FIND "${one}" "\"runs\":[" at)
math(EXPR from "${at} + 8")
string(FIND "${one}" "]}" end REVERSE)
math(EXPR length "${end} - ${from}")
string(SUBSTRING "${one}" 0 ${from} head)
string(SUBSTRING "${one}" ${from} ${length} run)
math(EXPR count "${SIZE_MB} * 1048576 / ${length}")
string(REPEAT "${run}," ${count} runs)
file(WRITE "${OUT}" "${head}${runs}${run}]}\n")
