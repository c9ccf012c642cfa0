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
#       values out of range, malformed or missing Devices) refuse their export
#       with a message that names the problem; a good export still serves.
#
# The program behind them is ctest/fsal/fsal_guard.c (fsal_guard --help).
if(NOT TARGET fsalngnfs)
	message(STATUS "ctest/fsal.cmake: the FSAL is not built; FSAL tests skipped")
	return()
endif()
if(NOT LIBNFS_FOUND)
	message(FATAL_ERROR "ctest/fsal.cmake: the FSAL tests need libnfs (libnfs-dev)")
endif()
find_program(NGNFS_GANESHA_NFSD ganesha.nfsd PATHS /usr/bin /usr/sbin REQUIRED)

add_executable(fsal_guard ${NGNFS_TEST_DIR}/fsal/fsal_guard.c)
target_link_libraries(fsal_guard PRIVATE PkgConfig::LIBNFS)
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
	add_test(NAME fsal.${test}
		 COMMAND fsal_guard --plugin-dir ${plugin_dir} --mode ${mode}
			 --ganesha ${NGNFS_GANESHA_NFSD} --time-limit ${fsal_guard_time_limit})
	# The program bounds itself; ctest's limit is the backstop.
	set_tests_properties(fsal.${test} PROPERTIES TIMEOUT 90 LABELS fsal)
endforeach()
