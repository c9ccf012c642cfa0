# Tests of blockd (the per-device block server): real blockd processes on
# loopback ports in temporary folders (ctest/harness/cluster.h), driven
# over raw sockets by a small synchronous client (ctest/blockd/tclient.c),
# one ctest test per behaviour (the case names in test_blockd.c), plus a
# systemd-analyze check of the unit in packaging/.
add_library(ngnfs_test_tclient STATIC ${NGNFS_TEST_DIR}/blockd/tclient.c)
target_include_directories(ngnfs_test_tclient PUBLIC ${NGNFS_TEST_DIR}/blockd)
target_link_libraries(ngnfs_test_tclient PUBLIC ngnfs_core)

add_executable(test_blockd ${NGNFS_TEST_DIR}/blockd/test_blockd.c)
target_include_directories(test_blockd PRIVATE ${CMAKE_SOURCE_DIR}/blockd)
target_compile_definitions(test_blockd PRIVATE
			   NGNFS_SAMPLE_CONF="${CMAKE_SOURCE_DIR}/conf/blockd.conf")
target_link_libraries(test_blockd PRIVATE ngnfs_test_tclient ngnfs_test_harness
		      PkgConfig::ROCKSDB)

foreach(case bad_flags bad_config config_file_serves foreign_folder foreign_rocksdb busy_port
	     hello_wrong_fs_id unformatted write_read frame_in_pieces grant_waits_for_pending_write
	     write_behind_write
	     write_refused corrupt_block
	     malformed_frames held_write grant_fifo alloc session_epochs cmpxchg_incoherent set_commit
	     indoubt_abort indoubt_commit indoubt_restart restart_sigterm restart_sigkill commit_log_replay
	     commit_log_wraps commit_log_damage commit_log_torn_end commit_log_resize store_upgrade grace primary_timeout
	     group_commit sigterm_under_load sigkill_under_load
	     resolved_sets_stay_resolved stale_stage_keeps_pin indoubt_sigterm store_failure_stops
	     unread_replies unread_replies_revoked
	     max_sessions hello_timeout revoke_timeout)
	# The cases that run blockd's commit and resolver threads against its
	# event loop (in-doubt sets, group commit, stops under load) are
	# concurrency tests: the ThreadSanitizer pass runs them (label tsan).
	if(case MATCHES "^(indoubt_|group_commit|write_behind_write|.*_under_load|resolved_sets|stale_stage)")
		set(labels blockd tsan)
	else()
		set(labels blockd)
	endif()
	ngnfs_add_cluster_test(NAME blockd_${case} COMMAND test_blockd ${case} TIMEOUT 60
			       LABELS ${labels})
endforeach()

find_program(NGNFS_SYSTEMD_ANALYZE systemd-analyze)
if(NGNFS_SYSTEMD_ANALYZE AND TARGET blockd)
	add_test(NAME blockd_systemd_unit_verify
		 COMMAND ${NGNFS_TEST_DIR}/blockd/verify-unit.sh
			 ${CMAKE_SOURCE_DIR}/packaging/blockd@.service $<TARGET_FILE:blockd>)
	set_tests_properties(blockd_systemd_unit_verify PROPERTIES TIMEOUT 60 LABELS blockd)
endif()
