# Tests of the NGNFS FSAL: they run the stock ganesha.nfsd with the plugin
# from the build folder (NFS_CORE_PARAM { Plugins_Dir = ... }), each daemon in
# its own temporary folder on its own loopback port, stopped by its PID.
#
#   fsal.guard_config_h_matches_daemon   the guard: the values the plugin
#       reads from ganesha's structures are those in the config (our
#       generated config.h matches the daemon's), and a real NFSv4 client
#       (libnfs) mounts the export and reads its root.
#   fsal.guard_detects_config_h_mismatch the same daemon with the plugin built
#       from a deliberately wrong config.h (_USE_NLM off): the guard must see
#       the mismatch, proving it can fail.
#   fsal.export_options_refused          bad FSAL options (unknown Durability,
#       values out of range, malformed Devices, neither or both of Devices and
#       Devices_File, a missing or malformed manifest) and devices that cannot
#       serve (nothing listening, an unformatted blockd) refuse their export
#       with a message that names the problem; a good export (Devices_File)
#       still serves, and so does one whose device 1 is unreachable under
#       Allow_Unreachable_Devices = true.
#
# The program behind them is ctest/fsal/fsal_guard.c (fsal_guard --help).
# It starts a real two-device blockd cluster (ctest/harness/cluster.h) and
# formats it with ngnfs_mkfs, plus an unformatted one for the refusal case.
if(NOT TARGET fsalngnfs)
	message(STATUS "ctest/fsal.cmake: the FSAL is not built; FSAL tests skipped")
	return()
endif()
if(NOT LIBNFS_FOUND)
	message(FATAL_ERROR "ctest/fsal.cmake: the FSAL tests need libnfs (libnfs-dev)")
endif()
find_program(NGNFS_GANESHA_NFSD ganesha.nfsd PATHS /usr/bin /usr/sbin REQUIRED)

add_executable(fsal_guard ${NGNFS_TEST_DIR}/fsal/fsal_guard.c)
target_link_libraries(fsal_guard PRIVATE ngnfs_test_harness ngnfs_core PkgConfig::LIBNFS)
# ctest does not build; make sure `make` builds both plugins with the test.
add_dependencies(fsal_guard fsalngnfs fsalngnfs_guard_mismatch)

set(fsal_guard_time_limit 60)
foreach(test guard_config_h_matches_daemon guard_detects_config_h_mismatch
	export_options_refused)
	if(test STREQUAL guard_detects_config_h_mismatch)
		set(plugin_dir ${NGNFS_FSAL_MISMATCH_PLUGIN_DIR})
		set(mode mismatch)
	elseif(test STREQUAL export_options_refused)
		set(plugin_dir ${NGNFS_FSAL_PLUGIN_DIR})
		set(mode options)
	else()
		set(plugin_dir ${NGNFS_FSAL_PLUGIN_DIR})
		set(mode guard)
	endif()
	# The program bounds itself; ctest's limit is the backstop.
	ngnfs_add_cluster_test(NAME fsal.${test}
			       COMMAND fsal_guard --plugin-dir ${plugin_dir} --mode ${mode}
				       --ganesha ${NGNFS_GANESHA_NFSD}
				       --time-limit ${fsal_guard_time_limit}
			       TIMEOUT 90 LABELS fsal)
endforeach()

# End-to-end tests (ctest/fsal/e2e_nfs.c): real blockd clusters formatted
# with ngnfs_mkfs, the stock ganesha.nfsd with our plugin through
# ctest/fsal/ganesha_harness.c, libnfs and our NFSv4.2 client.
#
#   fsal.e2e_files      byte-exact data (small, large, sparse, appends,
#       truncates), directory trees, every case of rename, hard links and
#       symlinks, attributes and times (explicit and server time), EACCES /
#       EPERM for uid 1000, unlink of an open file, xattrs over NFSv4.2
#       (set / replace / get / list / remove, 64 KiB, 250-byte name,
#       missing names, a non-owner), statfs, forged handles answered
#       NFS4ERR_STALE / NFS4ERR_BADHANDLE with nothing changed, and the
#       advertised maxfilesize / maxlink / maxname are libcore's limits
#   fsal.e2e_bigdir     a directory of NGNFS_E2E_BIGDIR_ENTRIES entries listed
#       completely, every name exactly once (made through a writeback export
#       by four clients: stable creates run at ~230/s on 2 cores, writeback
#       at ~1400/s)
#   fsal.e2e_coherence  two gateways on one cluster see each other's
#       changes at once (up-calls counted in the logs), also through a
#       gateway whose up-call deliveries are slowed (the change waits for
#       them); concurrent creates in one directory through both keep every
#       entry; a third gateway runs from conf/ganesha.conf (the sample, with
#       only port, paths, grace and devices changed) and serves a file
#   fsal.e2e_restart    handles survive a gateway restart; kill -9 in stable
#       mode loses nothing that was acknowledged; the next gateway frees the
#       orphan a killed one left (a file unlinked while open)
#   fsal.e2e_outage     single-device and multi-device write-backs in
#       flight when every device dies are written again once the devices
#       return; one whose devices stay away past Reclaim_Timeout_Ms is lost,
#       changes the write verifier and fails the file's next COMMIT; a stable
#       create in flight at a device restart succeeds; a dead blockd gives
#       NFS4ERR_DELAY at once while it has been away for less than
#       Reclaim_Timeout_Ms and NFS4ERR_IO after, never a hang, and the
#       gateway works again when it returns; a rolling restart of every
#       device under a writing client shows it nothing but NFS4ERR_DELAY
#   fsal.e2e_nfs3       the same export over NFSv3 (Protocols = 3, 4), in a
#       private network and mount namespace (unshare(CLONE_NEWNET |
#       CLONE_NEWNS), lo up, a tmpfs on /run) with its own `rpcbind -f -w`,
#       stopped by PID, so the machine's rpcbind is never touched: the
#       registrations, byte-exact data, directories, rename, links, symlinks,
#       readdir, getattr/setattr (mode, size, times), unlink, NFS3ERR_NOENT and
#       other errors through libnfs's NFSv3, v3 and v4 seeing each other's
#       changes, NFS3ERR_JUKEBOX while a device restarts, and special files
#       with their device numbers.  Skipped (exit 77) where no namespace can be made (not root,
#       no namespace support) or rpcbind is not installed.
set(NGNFS_E2E_BIGDIR_ENTRIES 100000 CACHE STRING "Entries of fsal.e2e_bigdir's directory")
add_executable(e2e_nfs ${NGNFS_TEST_DIR}/fsal/e2e_nfs.c)
target_link_libraries(e2e_nfs PRIVATE ngnfs_nfs_test_tools ngnfs_test_harness ngnfs_core
		      PkgConfig::CMOCKA PkgConfig::LIBNFS Threads::Threads)
add_dependencies(e2e_nfs fsalngnfs)
find_program(NGNFS_RPCBIND rpcbind PATHS /usr/sbin /sbin)
if(NGNFS_RPCBIND)
	set(rpcbind_environment "NGNFS_RPCBIND=${NGNFS_RPCBIND}")
else()
	# the test reports itself skipped, saying rpcbind is missing
	set(rpcbind_environment "NGNFS_RPCBIND=/usr/sbin/rpcbind")
endif()
foreach(group files bigdir coherence restart outage nfs3)
	set(timeout 180)
	set(arguments)
	set(environment "NGNFS_GANESHA=${NGNFS_GANESHA_NFSD}"
			"NGNFS_SAMPLE_CONF=${PROJECT_SOURCE_DIR}/conf/ganesha.conf")
	if(group STREQUAL bigdir)
		set(timeout 420)
		set(arguments --entries ${NGNFS_E2E_BIGDIR_ENTRIES} --durability writeback)
	elseif(group STREQUAL nfs3)
		list(APPEND environment ${rpcbind_environment})
	endif()
	ngnfs_add_cluster_test(NAME fsal.e2e_${group}
			       COMMAND e2e_nfs --plugins-dir ${NGNFS_FSAL_PLUGIN_DIR} --group ${group}
				       ${arguments}
			       TIMEOUT ${timeout} LABELS fsal
			       ENVIRONMENT ${environment})
endforeach()
# e2e_nfs.c's NGNFS_E2E_SKIP: the machine cannot make the namespace
set_tests_properties(fsal.e2e_nfs3 PROPERTIES SKIP_RETURN_CODE 77)
