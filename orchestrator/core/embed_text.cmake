# cmake -DIN=FILE -DOUT=FILE.inc -P embed_text.cmake
# Writes OUT as one C++ raw string literal holding IN's bytes, for `#include` inside an
# expression. Run at build time (add_custom_command), so that the text travels inside the binary.
file(READ "${IN}" text)
set(delimiter "sextant_embed")
string(FIND "${text}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} holds the raw-string delimiter )${delimiter}\"")
endif()
set(out "// Generated from ${IN} by embed_text.cmake; do not edit.\nR\"${delimiter}(${text})${delimiter}\"\n")
file(WRITE "${OUT}" "${out}")
