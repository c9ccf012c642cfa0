# Benchmarks of libcore.  Built with the tree, never run by ctest.
#
#   client_bench   GET round trips (cached hits, full transfers; 1, 16 and
#                  128 outstanding) and write sets per second (1-device and
#                  3-device) against blockd on loopback.  Run:
#                  <build>/bench/client_bench [--seconds S] [--manifest FILE]
if(TARGET ngnfs_test_harness)
	add_executable(client_bench ${CMAKE_CURRENT_SOURCE_DIR}/libcore/client_bench.c)
	target_link_libraries(client_bench PRIVATE ngnfs_core ngnfs_test_harness)
	if(TARGET blockd)
		target_compile_definitions(client_bench PRIVATE
					   NGNFS_BENCH_BLOCKD="$<TARGET_FILE:blockd>")
	endif()
endif()
