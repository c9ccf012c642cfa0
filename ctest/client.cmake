# Tests of the network client (libcore/client.c, transport.c, manifest.c)
# against real blockd processes; they are the end-to-end tests of blockd's
# protocol too.
#
#   client.manifest       manifest parsing: comments, blank lines, order,
#                         and malformed lines refused with the line named.
#   client.session        every request type end to end; refusals (wrong
#                         fs id, wrong device index, mixed filesystems,
#                         unformatted device) with a clear message; request
#                         timeout; blockd killed mid-request fails fast and
#                         the client reconnects when it returns.
#   client.coherency      4 client processes increment 6 counters on 3
#                         servers under bouncing write grants (write and
#                         release, write and keep, dirty written back on
#                         revoke); the counts are exact.
#   client.atomicity      3-device sets under SIGKILL of clients and
#                         servers at random points: never a mixed set,
#                         nothing acknowledged lost (seed printed).
add_library(ngnfs_client_test STATIC ${NGNFS_TEST_DIR}/client/client_test.c)
target_link_libraries(ngnfs_client_test PUBLIC ngnfs_core ngnfs_test_harness)

add_executable(test_client_manifest ${NGNFS_TEST_DIR}/client/test_client_manifest.c)
target_link_libraries(test_client_manifest PRIVATE ngnfs_core)
add_test(NAME client.manifest COMMAND test_client_manifest)
set_tests_properties(client.manifest PROPERTIES TIMEOUT 10 LABELS client)

foreach(test session coherency atomicity)
	add_executable(test_client_${test} ${NGNFS_TEST_DIR}/client/test_client_${test}.c)
	target_link_libraries(test_client_${test} PRIVATE ngnfs_client_test)
endforeach()
# The network client's tests that run its I/O thread against callers'
# threads carry the label tsan (the ThreadSanitizer pass) too.
ngnfs_add_cluster_test(NAME client.session COMMAND test_client_session TIMEOUT 60
		       LABELS client tsan)
ngnfs_add_cluster_test(NAME client.coherency COMMAND test_client_coherency TIMEOUT 180
		       LABELS client tsan)
ngnfs_add_cluster_test(NAME client.atomicity COMMAND test_client_atomicity TIMEOUT 180
		       LABELS client tsan)

# client.flow: the client's side of the protocol against scripted fake
# servers (order of STAGE/COMMIT/RESOLVE, aborted sets, GRANTs out of
# order, REVOKE, COMMIT retried after a broken connection, a COMMIT never
# answered given up after commit_retry_ms and not the shorter request
# timeout, session_reset, timeout, devices of two filesystems, keepalive and
# TCP_USER_TIMEOUT on every session's socket).  No blockd needed.
add_executable(test_client_flow ${NGNFS_TEST_DIR}/client/test_client_flow.c)
target_link_libraries(test_client_flow PRIVATE ngnfs_client_test)
add_test(NAME client.flow COMMAND test_client_flow)
set_tests_properties(client.flow PROPERTIES TIMEOUT 30 LABELS "client;tsan"
		     ENVIRONMENT "${NGNFS_TSAN_ENVIRONMENT}")
