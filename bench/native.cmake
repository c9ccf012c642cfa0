# Benchmark of the native API (libcore/ngnfs.h) on real blockd processes:
# creates, untar, stat, readdir and xattr updates in writeback and stable
# mode on 1 and 3 devices, and RocksDB syncs per 1000 stable creates.
# Built with the tree, never run by ctest; run <build>/bench/native_bench
# (docs/performance.md, section "libcore native API", has the command
# and the figures).
if(TARGET ngnfs_test_harness)
	add_executable(native_bench ${CMAKE_CURRENT_SOURCE_DIR}/native/native_bench.c)
	target_link_libraries(native_bench PRIVATE ngnfs_core ngnfs_test_harness Threads::Threads)
	if(TARGET blockd)
		target_compile_definitions(native_bench PRIVATE
					   NGNFS_BENCH_BLOCKD="$<TARGET_FILE:blockd>")
		add_dependencies(native_bench blockd)
	endif()
endif()
