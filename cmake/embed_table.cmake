# Turn a tab-separated data file into a C source holding its rows, so the
# library carries MaxText's tables without reading files at run time.
# cmake -DIN=table.tsv -DOUT=table.c -DNAME=symbol -P embed_table.cmake
# Lines starting with '#' and empty lines are dropped.
file(STRINGS "${IN}" lines ENCODING UTF-8)
set(body "")
set(n 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^#")
    continue()
  endif()
  string(REPLACE "\\" "\\\\" line "${line}")
  string(REPLACE "\"" "\\\"" line "${line}")
  string(REPLACE "\t" "\\t" line "${line}")
  string(APPEND body "    \"${line}\",\n")
  math(EXPR n "${n} + 1")
endforeach()
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by cmake/embed_table.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern const char *const ${NAME}[];\n"
  "extern const size_t ${NAME}_n;\n"
  "const char *const ${NAME}[] = {\n${body}    NULL\n};\n"
  "const size_t ${NAME}_n = ${n};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
