# Turn a tab-separated data file into a C source holding its rows, so the
# library carries MaxText's tables without reading files at run time.
# cmake -DIN=table.tsv -DOUT=table.c -DNAME=symbol [-DCOLUMNS=N] -P embed_table.cmake
# Without COLUMNS: `const char *const NAME[]`, one string per row. With
# COLUMNS=N: `const char *const NAME[][N]`, the row split at its tabs (a row
# with another number of columns is an error). Either way NAME_n rows.
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
  if(DEFINED COLUMNS)
    string(REGEX MATCHALL "\t" tabs "${line}")
    list(LENGTH tabs ntabs)
    math(EXPR want "${COLUMNS} - 1")
    if(NOT ntabs EQUAL want)
      message(FATAL_ERROR "${IN}: row '${line}' has ${ntabs} tabs, expected ${want}")
    endif()
    string(REPLACE "\t" "\", \"" line "${line}")
    string(APPEND body "    { \"${line}\" },\n")
  else()
    string(REPLACE "\t" "\\t" line "${line}")
    string(APPEND body "    \"${line}\",\n")
  endif()
  math(EXPR n "${n} + 1")
endforeach()
if(DEFINED COLUMNS)
  set(decl "const char *const ${NAME}[][${COLUMNS}]")
  set(last "    { NULL }\n")
else()
  set(decl "const char *const ${NAME}[]")
  set(last "    NULL\n")
endif()
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by cmake/embed_table.cmake; do not edit. */\n"
  "#include <stddef.h>\n"
  "extern ${decl};\n"
  "extern const size_t ${NAME}_n;\n"
  "${decl} = {\n${body}${last}};\n"
  "const size_t ${NAME}_n = ${n};\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
