# Tests of the protocol codec (libcore/msg.c), its fuzzer, and the shared
# test harness every other area links (ctest/harness/).
#
# This file is included first by ctest/CMakeLists.txt, so the harness
# library and ngnfs_add_cluster_test() defined here are available to every
# other ctest/<area>.cmake.

# ---- shared harness -------------------------------------------------------

add_library(ngnfs_test_harness STATIC ${NGNFS_TEST_DIR}/harness/cluster.c)
target_include_directories(ngnfs_test_harness PUBLIC ${NGNFS_TEST_DIR}/harness)

# ngnfs_add_cluster_test(NAME name COMMAND cmd [args...] [TIMEOUT seconds]
#                        [ENVIRONMENT VAR=value...] [LABELS label...])
#
# add_test() for a test that starts blockd through ctest/harness/cluster.h:
# passes the blockd binary as NGNFS_BLOCKD (and the admin tool as
# NGNFS_TOOL when it is built) and bounds the test's time (default 120 s).
# While blockd is not part of the build the test is registered DISABLED,
# so ctest says "Not Run (Disabled)" instead of pretending it passed.
# A test labelled tsan gets ${NGNFS_TSAN_ENVIRONMENT} unless it sets
# TSAN_OPTIONS itself.
function(ngnfs_add_cluster_test)
	cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "COMMAND;ENVIRONMENT;LABELS" ${ARGN})
	if(NOT ARG_NAME OR NOT ARG_COMMAND)
		message(FATAL_ERROR "ngnfs_add_cluster_test needs NAME and COMMAND")
	endif()
	if(NOT ARG_TIMEOUT)
		set(ARG_TIMEOUT 120)
	endif()
	add_test(NAME ${ARG_NAME} COMMAND ${ARG_COMMAND})
	set(environment ${ARG_ENVIRONMENT})
	if("tsan" IN_LIST ARG_LABELS AND NOT environment MATCHES "TSAN_OPTIONS=")
		list(APPEND environment "${NGNFS_TSAN_ENVIRONMENT}")
	endif()
	if(TARGET blockd)
		list(APPEND environment "NGNFS_BLOCKD=$<TARGET_FILE:blockd>")
	else()
		set_tests_properties(${ARG_NAME} PROPERTIES DISABLED TRUE)
	endif()
	if(TARGET ngnfs)
		list(APPEND environment "NGNFS_TOOL=$<TARGET_FILE:ngnfs>")
	endif()
	set_tests_properties(${ARG_NAME} PROPERTIES TIMEOUT ${ARG_TIMEOUT})
	if(environment)
		set_tests_properties(${ARG_NAME} PROPERTIES ENVIRONMENT "${environment}")
	endif()
	if(ARG_LABELS)
		set_tests_properties(${ARG_NAME} PROPERTIES LABELS "${ARG_LABELS}")
	endif()
endfunction()

# The harness's own test: start, kill, restart and stop real blockd
# processes, and the shell-less runner.
add_executable(test_harness_cluster ${NGNFS_TEST_DIR}/harness/test_cluster.c)
target_link_libraries(test_harness_cluster PRIVATE ngnfs_test_harness PkgConfig::CMOCKA)
ngnfs_add_cluster_test(NAME harness_cluster_lifecycle COMMAND test_harness_cluster TIMEOUT 60)

# ---- codec -----------------------------------------------------------------

# Round trips of every message type and a table of malformed frames, each
# refused with the errno the protocol promises.
#
# The codec tests compile libcore/msg.c themselves instead of linking
# ngnfs_core: msg.c depends on nothing but ISA-L, and this way the codec's
# tests (and the fuzzer's seeds) do not stop building while other parts of
# libcore are mid-change.  Same source, same flags as in the library.
set(NGNFS_MSG_SOURCE ${PROJECT_SOURCE_DIR}/libcore/msg.c)
add_executable(test_msg ${NGNFS_TEST_DIR}/msg/test_msg.c ${NGNFS_MSG_SOURCE})
target_include_directories(test_msg PRIVATE ${PROJECT_SOURCE_DIR}/libcore)
target_link_libraries(test_msg PRIVATE PkgConfig::ISAL PkgConfig::CMOCKA)
add_test(NAME msg_codec COMMAND test_msg)
set_tests_properties(msg_codec PROPERTIES TIMEOUT 60)

# ---- fuzzer ----------------------------------------------------------------

# The seed corpus generator is an ordinary program of the main build, so
# the seeds always match the current wire format.
add_executable(msg_gen_corpus ${NGNFS_TEST_DIR}/msg/gen_corpus.c ${NGNFS_MSG_SOURCE})
target_include_directories(msg_gen_corpus PRIVATE ${PROJECT_SOURCE_DIR}/libcore)
target_link_libraries(msg_gen_corpus PRIVATE PkgConfig::ISAL)

# libFuzzer needs clang while the tree is built with gcc, so the fuzzer is
# compiled by a custom command straight from the codec's sources (msg.c has
# no dependency but ISA-L), with ASan and UBSan, outside the gcc flags.
find_program(NGNFS_CLANG NAMES clang clang-14 clang-15 clang-16)
if(NGNFS_FUZZ AND NGNFS_CLANG)
	set(fuzz_binary ${CMAKE_CURRENT_BINARY_DIR}/fuzz_msg)
	set(fuzz_sources ${NGNFS_TEST_DIR}/msg/fuzz_msg.c ${PROJECT_SOURCE_DIR}/libcore/msg.c)
	add_custom_command(
		OUTPUT ${fuzz_binary}
		COMMAND ${NGNFS_CLANG} -g -O1 -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE
			-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
			-fno-omit-frame-pointer -I${PROJECT_SOURCE_DIR}/libcore ${fuzz_sources}
			-lisal -o ${fuzz_binary}
		DEPENDS ${fuzz_sources} ${PROJECT_SOURCE_DIR}/libcore/msg.h
			${PROJECT_SOURCE_DIR}/libcore/format-msg.h
		COMMENT "Building the codec fuzzer with clang (libFuzzer, ASan, UBSan)"
		VERBATIM)
	add_custom_target(fuzz_msg ALL DEPENDS ${fuzz_binary})

	# Bounded run: a fresh corpus of seeds each time (so the run is the same
	# size every time), then at most 2000000 inputs or 20 s.  A crash fails
	# the test and leaves its input as crash-* in the build folder's
	# ctest/fuzz-msg-artifacts/ (reproduce: fuzz_msg that-file).
	set(fuzz_corpus ${CMAKE_CURRENT_BINARY_DIR}/fuzz-msg-corpus)
	set(fuzz_artifacts ${CMAKE_CURRENT_BINARY_DIR}/fuzz-msg-artifacts/)
	set(fuzz_prepare ${CMAKE_CURRENT_BINARY_DIR}/fuzz-msg-prepare.cmake)
	file(WRITE ${fuzz_prepare} "file(REMOVE_RECURSE \"${fuzz_corpus}\")\n"
				   "file(MAKE_DIRECTORY \"${fuzz_corpus}\" \"${fuzz_artifacts}\")\n")
	add_test(NAME msg_fuzz_corpus COMMAND ${CMAKE_COMMAND} -P ${fuzz_prepare})
	add_test(NAME msg_fuzz_seeds COMMAND msg_gen_corpus ${fuzz_corpus})
	add_test(NAME msg_fuzz
		 COMMAND ${fuzz_binary} -runs=2000000 -max_total_time=20 -max_len=20000
			 -print_final_stats=1 -artifact_prefix=${fuzz_artifacts} ${fuzz_corpus})
	set_tests_properties(msg_fuzz_corpus PROPERTIES FIXTURES_SETUP msg_fuzz_dirs)
	set_tests_properties(msg_fuzz_seeds PROPERTIES FIXTURES_REQUIRED msg_fuzz_dirs
				 FIXTURES_SETUP msg_fuzz_seeds)
	set_tests_properties(msg_fuzz PROPERTIES FIXTURES_REQUIRED "msg_fuzz_dirs;msg_fuzz_seeds"
				 TIMEOUT 90)
elseif(NGNFS_FUZZ)
	message(STATUS "clang not found: the codec fuzzer is not built")
endif()
