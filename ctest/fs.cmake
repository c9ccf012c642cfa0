# Tests of the POSIX filesystem on blocks (libcore/btree.c, dir.c, inode.c,
# namei.c, super.c, fs.c, fsck.c) and the admin tool's fs commands.
#
# Every test runs twice: over an in-memory test double of txn.h
# (ctest/fs/fake_txn.c, linked into a test-only library built from the fs
# sources, which injects -EAGAIN retries to prove operations re-runnable),
# and over the real cache, client and blockd processes (cluster tests).
# directory_1m (a directory of 1,000,000 entries) runs only over the double
# and carries the label "long".

set(NGNFS_FS_SOURCES_DIR ${CMAKE_SOURCE_DIR}/libcore)
set(NGNFS_FS_FAKE_SOURCES ${NGNFS_TEST_DIR}/fs/fake_txn.c)
foreach(source btree dir inode namei super fs fsck data xattr)
	if(EXISTS ${NGNFS_FS_SOURCES_DIR}/${source}.c)
		list(APPEND NGNFS_FS_FAKE_SOURCES ${NGNFS_FS_SOURCES_DIR}/${source}.c)
	endif()
endforeach()
add_library(ngnfs_fs_fake STATIC ${NGNFS_FS_FAKE_SOURCES})
target_include_directories(ngnfs_fs_fake PUBLIC ${NGNFS_FS_SOURCES_DIR} ${NGNFS_TEST_DIR}/fs)
target_link_libraries(ngnfs_fs_fake PUBLIC PkgConfig::XXHASH PkgConfig::ISAL Threads::Threads)

set(NGNFS_FS_TEST_SOURCES ${NGNFS_TEST_DIR}/fs/test_fs.c ${NGNFS_TEST_DIR}/fs/test_fs_model.c
			  ${NGNFS_TEST_DIR}/fs/fs_test_util.c
			  ${NGNFS_TEST_DIR}/fs/test_fs_internal.c)
add_executable(test_fs_fake ${NGNFS_FS_TEST_SOURCES})
target_link_libraries(test_fs_fake PRIVATE ngnfs_fs_fake)

add_executable(test_fs_real ${NGNFS_FS_TEST_SOURCES} ${NGNFS_TEST_DIR}/fs/test_fs_multi.c)
target_compile_definitions(test_fs_real PRIVATE NGNFS_FS_TEST_REAL)
target_include_directories(test_fs_real PRIVATE ${NGNFS_TEST_DIR}/fs)
target_link_libraries(test_fs_real PRIVATE ngnfs_core ngnfs_test_harness)

set(NGNFS_FS_TESTS btree_random_vs_reference btree_sequential_splits names link_counts
		   rename_cases orphan_unlink_open symlinks special_files setattr stale_handles
		   write_after_getattr_reads_back
		   dirent_collisions readdir_exact readdir_cookies_100k fsck_clean fsck_finds_problems dir_corrupt_leaf_create model_random
		   sync_inode_one_file create_with_times)
foreach(test ${NGNFS_FS_TESTS})
	add_test(NAME fs_fake_${test} COMMAND test_fs_fake ${test})
	set_tests_properties(fs_fake_${test} PROPERTIES TIMEOUT 120)
	ngnfs_add_cluster_test(NAME fs_real_${test} COMMAND test_fs_real ${test} TIMEOUT 180)
endforeach()
# A loss recorded against an inode block that a new file gets later: the
# fake store alone can hand a block out again on demand.
add_test(NAME fs_fake_loss_not_inherited COMMAND test_fs_fake loss_not_inherited)
set_tests_properties(fs_fake_loss_not_inherited PROPERTIES TIMEOUT 120)
# Several client processes on one filesystem: real blockd only.  The three
# concurrency tests carry the label tsan (the ThreadSanitizer pass).
foreach(test two_clients_see_each_other concurrent_renames_two_clients rename_subtree_race)
	ngnfs_add_cluster_test(NAME fs_real_${test} COMMAND test_fs_real ${test} TIMEOUT 180
			       LABELS tsan)
endforeach()
ngnfs_add_cluster_test(NAME fs_real_tool_commands COMMAND test_fs_real tool_commands TIMEOUT 180)
ngnfs_add_cluster_test(NAME fs_real_tool_xattr COMMAND test_fs_real tool_xattr TIMEOUT 180)
# A mount with a device down: refused, or (allow_unreachable_devices) served.
ngnfs_add_cluster_test(NAME fs_real_mount_with_device_down
		       COMMAND test_fs_real mount_with_device_down TIMEOUT 180)
# A gateway gone with a file open after its unlink: `ngnfs reclaim-orphans`.
ngnfs_add_cluster_test(NAME fs_real_orphans_reclaimed_after_crash
		       COMMAND test_fs_real orphans_reclaimed_after_crash TIMEOUT 180)
# A filesystem of 2 devices grown to 3 (`ngnfs add-devices`).
ngnfs_add_cluster_test(NAME fs_real_add_devices COMMAND test_fs_real add_devices TIMEOUT 180)
# A writeback gateway killed with a create in memory: the lost file's handle
# is stale, not the next file in its block.
ngnfs_add_cluster_test(NAME fs_real_lost_create_handle_stale
		       COMMAND test_fs_real lost_create_handle_stale TIMEOUT 180)
# Wrong link and entry counts repaired by CMPXCHG while a client holds the
# inodes (library and `ngnfs fsck --repair`).
ngnfs_add_cluster_test(NAME fs_real_fsck_repairs_online COMMAND test_fs_real fsck_repairs_online
		       TIMEOUT 180)
# Two small devices (blockd --total-blocks 800) filled through one directory.
# A client stopped with SIGSTOP while it holds grants (blockd --revoke-timeout-ms).
ngnfs_add_cluster_test(NAME fs_real_stopped_client_loses_grants
		       COMMAND test_fs_real stopped_client_loses_grants TIMEOUT 180)
# A device restarted with a 4 s grace period (blockd --grace-ms): creates
# meanwhile place their inodes on the other device.
ngnfs_add_cluster_test(NAME fs_real_restart_grace_places_elsewhere
		       COMMAND test_fs_real restart_grace_places_elsewhere TIMEOUT 180)
# A created file's open counted while its device is away (a gateway's OPEN
# whose create committed just before a restart).
ngnfs_add_cluster_test(NAME fs_real_open_created_without_device
		       COMMAND test_fs_real open_created_without_device TIMEOUT 180)
# blockd killed (--commit-delay-ms) under a write of several frames: the
# set is written again after the restart.
ngnfs_add_cluster_test(NAME fs_real_held_write_across_restart
		       COMMAND test_fs_real held_write_across_restart TIMEOUT 180)
# A 1 MiB block cache: evicted inodes reach the invalidate callback.
ngnfs_add_cluster_test(NAME fs_real_evicted_inode_is_invalidated
		       COMMAND test_fs_real evicted_inode_is_invalidated TIMEOUT 180)
ngnfs_add_cluster_test(NAME fs_real_full_device_overflows COMMAND test_fs_real full_device_overflows
		       TIMEOUT 180)
# NGNFS_LINK_MAX links of one file: the double only (65000 operations).
add_test(NAME fs_fake_link_max COMMAND test_fs_fake link_max)
set_tests_properties(fs_fake_link_max PROPERTIES TIMEOUT 120)
add_test(NAME fs_fake_directory_1m COMMAND test_fs_fake directory_1m)
set_tests_properties(fs_fake_directory_1m PROPERTIES TIMEOUT 600 LABELS long)
# Test paths are built with snprintf into fixed buffers that are large enough.
target_compile_options(test_fs_fake PRIVATE -Wno-format-truncation)
target_compile_options(test_fs_real PRIVATE -Wno-format-truncation)
