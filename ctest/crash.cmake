# Crash tests (ctest/crash/): kill -9 a client process or a blockd in the
# middle of a create/write/setxattr workload on a 3-device filesystem,
# then check from another mount that every operation acknowledged as
# durable is there, nothing is half-applied, and fsck finds no problem.
# Each case prints its seed; NGNFS_TEST_SEED=N reruns the same kill points.
# blockd_power_cut_stable: blockd_kill_stable with RocksDB written without
# its WAL (--rocksdb-wal false, the default), so that only the commit log
# restores what was acknowledged; blockd_kill_stable itself runs blockd with
# --rocksdb-wal true.
# client_kill_unstable_writes: a stable mount's UNSTABLE writes (NFS
# UNSTABLE) are lost with the client unless synced or merged with a stable
# operation; STABLE writes and later metadata operations are not.
add_executable(test_crash ${NGNFS_TEST_DIR}/crash/test_crash.c)
target_link_libraries(test_crash PRIVATE ngnfs_core ngnfs_test_harness)
foreach(case client_kill_stable client_kill_writeback blockd_kill_stable
	     blockd_power_cut_stable client_kill_unstable_writes)
	ngnfs_add_cluster_test(NAME crash_${case} COMMAND test_crash ${case} TIMEOUT 150
			       LABELS crash)
endforeach()
