# The install-and-embed test (ctest -L install), run as
#   cmake -DAMPC_BINARY_DIR=... -DAMPC_SOURCE_DIR=... -DWORK_DIR=... \
#         -DGENERATOR=... -DAMPC_VERSION=... -P InstallTest.cmake
# Installs the built project to a fresh prefix, checks the installed CLI's
# version and the pkg-config file, builds this folder against the installed
# package with find_package(ampc) and runs it on examples/mlp.yaml.
foreach(var AMPC_BINARY_DIR AMPC_SOURCE_DIR WORK_DIR GENERATOR AMPC_VERSION)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "InstallTest.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run("install" ${CMAKE_COMMAND} --install ${AMPC_BINARY_DIR} --prefix ${prefix})
foreach(f include/ampc/ampc.h include/ampc/Version.h lib/cmake/ampc/ampcConfig.cmake
          lib/cmake/ampc/ampcConfigVersion.cmake lib/pkgconfig/ampc.pc bin/ampc)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install did not write ${f}")
  endif()
endforeach()

# The CLI and the package agree on the version.
run("ampc --version" ${prefix}/bin/ampc --version)
string(STRIP "${OUT}" cliVersion)
if(NOT cliVersion STREQUAL "ampc ${AMPC_VERSION}")
  message(FATAL_ERROR "installed ampc --version says '${cliVersion}', expected 'ampc ${AMPC_VERSION}'")
endif()
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
if(PKG_CONFIG)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  run("pkg-config" ${PKG_CONFIG} --modversion ampc)
  string(STRIP "${OUT}" pcVersion)
  if(NOT pcVersion STREQUAL AMPC_VERSION)
    message(FATAL_ERROR "pkg-config says version '${pcVersion}', expected '${AMPC_VERSION}'")
  endif()
endif()

# An external project against the installed package only.
run("configure embed" ${CMAKE_COMMAND} -S ${AMPC_SOURCE_DIR}/examples/embed -B ${WORK_DIR}/build
    -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${prefix})
run("build embed" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("run embed" ${WORK_DIR}/build/embed ${AMPC_SOURCE_DIR}/examples/mlp.yaml 2)
message("${OUT}")
foreach(expect "ampc ${AMPC_VERSION} (built against ${AMPC_VERSION})" "embed.swish" "trained 2 steps")
  string(FIND "${OUT}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "embed's output lacks '${expect}'")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
