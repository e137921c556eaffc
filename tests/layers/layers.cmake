# The layers (app -> dist -> data -> core, and app -> pytorch -> core) as
# the compiler enforces them:
# each file under layers/ is compiled with exactly the include paths of one
# layer, and must fail on the header of the layer above it, by name. The
# control file proves the same set-up compiles a legal include.
function(layer_include_test lower upper header)
  set(target layer_${lower}_includes_${upper})
  add_library(${target} OBJECT EXCLUDE_FROM_ALL layers/${lower}_includes_${upper}.c)
  target_link_libraries(${target} PRIVATE dstrain_${lower})
  add_test(NAME layers_${lower}_cannot_include_${upper}
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target ${target})
  set_tests_properties(layers_${lower}_cannot_include_${upper} PROPERTIES
                       PASS_REGULAR_EXPRESSION "${header}: No such file or directory"
                       RESOURCE_LOCK layer_build)
endfunction()
layer_include_test(core data dataset.h)
layer_include_test(core dist reduce.h)
layer_include_test(core app train.h)
layer_include_test(data dist world.h)
layer_include_test(data app cli.h)
layer_include_test(dist app train.h)
layer_include_test(core pytorch pt_file.h)
layer_include_test(pytorch app cli.h)
layer_include_test(pytorch data dataset.h)

add_library(layer_core_includes_core OBJECT EXCLUDE_FROM_ALL layers/core_includes_core.c)
target_link_libraries(layer_core_includes_core PRIVATE dstrain_core)
add_test(NAME layers_control_compiles
         COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target layer_core_includes_core)
set_tests_properties(layers_control_compiles PROPERTIES RESOURCE_LOCK layer_build)

# The prefix rule: every symbol the libraries export carries its file's module
# prefix (ds_<file>_ or its family's, ds_cpu_/ds_cuda_/cuda_<op> in the
# backends), read from the built archives with nm. The fixture proves the
# check names a symbol that breaks it, and passes the one that keeps it.
add_test(NAME layers_module_prefixes
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_prefixes.py
                 ${CMAKE_NM} ${CMAKE_SOURCE_DIR}
                 $<TARGET_FILE:dstrain_core> $<TARGET_FILE:dstrain_data> $<TARGET_FILE:dstrain_dist>
                 $<TARGET_FILE:dstrain_pytorch> $<TARGET_FILE:dstrain_app>)
add_library(layer_prefix_bad STATIC layers/prefix_bad.c)
add_test(NAME layers_prefix_check_detects
         COMMAND ${DSTRAIN_PEER_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_prefixes.py
                 ${CMAKE_NM} ${CMAKE_SOURCE_DIR} $<TARGET_FILE:layer_prefix_bad>)
set_tests_properties(layers_prefix_check_detects PROPERTIES
                     PASS_REGULAR_EXPRESSION "no module prefix: prefix_bad.c.o: ds_wrong_module_name\n2 exported symbols checked, 1 without")
set_tests_properties(layers_module_prefixes layers_prefix_check_detects PROPERTIES TIMEOUT 60)
