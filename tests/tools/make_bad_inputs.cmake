# Writes the malformed inputs the traceml command must reject, from a real summary
# (cmake -DSUMMARY=mlp_summary.json -DOUT=dir -P make_bad_inputs.cmake).
file(READ "${SUMMARY}" good)
file(MAKE_DIRECTORY "${OUT}")
# A writer killed mid-way: the first half of the file.
string(LENGTH "${good}" n)
math(EXPR half "${n} / 2")
string(SUBSTRING "${good}" 0 ${half} truncated)
file(WRITE "${OUT}/truncated.json" "${truncated}")
# Another schema version.
string(REPLACE "\"traceml.summary/3\"" "\"traceml.summary/1\"" other_schema "${good}")
file(WRITE "${OUT}/other_schema.json" "${other_schema}")
# A field the reader needs, renamed (the first "median": the measured steps' step_ms).
string(FIND "${good}" "\"median\":" at)
string(SUBSTRING "${good}" 0 ${at} before)
math(EXPR after_at "${at} + 9")
string(SUBSTRING "${good}" ${after_at} -1 after)
file(WRITE "${OUT}/missing_field.json" "${before}\"medians\":${after}")
# Not JSON at all on line 3.
file(WRITE "${OUT}/malformed.json" "{\n  \"schema\": \"traceml.summary/3\",\n  runs: []\n}\n")
# JSON, but not a traceml summary.
file(WRITE "${OUT}/not_summary.json" "{\"name\": \"something else\"}\n")
