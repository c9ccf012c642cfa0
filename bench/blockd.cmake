# blockd's benchmark: group-commit write throughput against RocksDB's own
# db_bench on the same synced, batched writes, and GET round trips.
# Built with the tree, never run by ctest; run build/bench/bench_blockd
# (docs/performance.md, section "blockd", has the command and figures).
if(TARGET blockd AND TARGET ngnfs_test_harness AND TARGET ngnfs_test_tclient)
	add_executable(bench_blockd ${CMAKE_CURRENT_SOURCE_DIR}/blockd/bench_blockd.c)
	target_link_libraries(bench_blockd PRIVATE ngnfs_test_tclient ngnfs_test_harness
			      Threads::Threads)
	target_compile_definitions(bench_blockd PRIVATE
				   NGNFS_BLOCKD_PATH="$<TARGET_FILE:blockd>")
	add_dependencies(bench_blockd blockd)
endif()

# What one durable write costs below blockd (fdatasync, RocksDB synced
# batch); docs/performance.md, "Where a stable operation's time goes".
add_executable(wal_sync_bench ${CMAKE_CURRENT_SOURCE_DIR}/blockd/wal_sync_bench.c)
target_link_libraries(wal_sync_bench PRIVATE PkgConfig::ROCKSDB)
