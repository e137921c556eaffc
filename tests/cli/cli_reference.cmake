# The command line's description of itself (tests/cli/test_reference.sh):
# docs/cli.md's option reference is `dstrain help --markdown` byte for byte
# (else run scripts/update-readme-reference.sh); every option of every table
# is in docs/cli.md and its command's --help, parses as its table says and is
# handled; wrong options and commands get the nearest suggested, exit 2.
foreach(part readme help suggest)
  add_test(NAME cli_reference_${part}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/test_reference.sh ${part}
                   $<TARGET_FILE:dstrain> ${CMAKE_SOURCE_DIR})
  set_tests_properties(cli_reference_${part} PROPERTIES TIMEOUT 300)
endforeach()
