# Tests of the block cache and transactions (libcore/cache.c, txn.c, dirty.c).
#
# One program, ctest/cache/test_cache.c, built twice:
#
#   test_cache_fake  links the cache with ctest/cache/fake_client.c, an
#       in-process double of client.h (one fake server with a real grant
#       table, FIFO queues and revocations, so two caches in one process
#       revoke each other).  Runs without any server: tests cache.<name>.
#   test_cache_real  links the real libcore (network client) and starts
#       blockd processes through ctest/harness/cluster.h: tests
#       cache.real.<name> (registered DISABLED while blockd is not built).
#
# What each test proves:
#   eviction_bounds_memory           cached data never exceeds cache_bytes while
#       200 blocks go through a 32-block cache; dirty and read-locked blocks
#       are never evicted (their contents survive, dirty ones reach the server
#       on sync).
#   eviction_invalidates             every block evicted (released) is passed to
#       the invalidate callback, so the gateway's MDCACHE does not outlive it;
#       blocks still cached are not.
#   pressure_writes_back_dirty       64 dirty blocks in a 16-block writeback
#       cache: memory pressure writes dirty sets back so the bound holds.
#   dirty_set_merging                blocks dirtied separately leave separately
#       on a revocation; a transaction touching two sets merges them and a
#       revocation of one block writes both in a single write.
#   retry_leaves_no_trace            a function that modifies and then returns
#       -EAGAIN itself changes nothing; a function stopped by a conflict reruns
#       from committed state (counter incremented once), counts a retry and
#       gets the same block back from the allocation pool.
#   stable_group_commit              64 threads committing at once in stable
#       mode share far fewer than 64 writes (asserted < 32), and each one's
#       block is on the server when its ngnfs_txn_run returns.
#   writeback_flush_within_interval  a writeback-mode write returns before its
#       write is sent; the flusher sends it when the interval is over (not
#       before, at most 300 ms late) and the server then has it; sync on a
#       cache with a 60 s interval writes at once.
#   revocation_writes_back_before_release  another client reading a dirty block
#       sees the data, the whole dirty set (other device too) was written
#       first; a write by the other client invalidates the first one's copy
#       and the first reads the new data back.
#   revocation_waits_for_local_lock  a revocation of a block a transaction
#       holds waits for its unlock while the I/O thread keeps serving others.
#   abba_transfers_conserve_total    the deadlock test: 2 clients x 4 threads
#       doing transfers that lock A then B and B then A, plus create/unlink
#       transactions (ALLOC + directory slot, free + slot cleared), run to
#       completion; the account total is conserved and every named block holds
#       its marker.
#   upgrade_contention_keeps_dirty_sets  2 clients x 2 threads read two blocks
#       (devices 0 and 1), then take them for write to add one to each, in
#       stable and in writeback mode; the READ grant is revoked while its
#       upgrade GET is queued, and the RELEASE answering that must not strip
#       the upgrade: no write-back fails (EPERM lost sets before the fix) and
#       the servers end with exactly the number of increments made.
#   reclaim_timeout_sets_commit_retry  a cache's reclaim timeout (4321 ms, and
#       the 30 s default) is what its client retries an unanswered
#       multi-device COMMIT for, not the client's request timeout.
#   abba_two_processes               (real only) the same with the second client
#       in its own process (test_cache_real --abba-worker ADDRESS...), as two
#       gateways would be.
#   restart_reclaims_dirty           (real only) blockd of the dirty block's
#       device is killed and restarted: the client reclaims the write grant at
#       the block's base version during the grace period and the block is
#       written; the restarted server has it.
#   device_away_is_try_again         (real only) blockd of device 1 is killed:
#       a read of its block returns -EAGAIN (the gateway's NFS4ERR_DELAY) at
#       once while the session has been lost for less than the reclaim
#       timeout (1.5 s here), -ENOTCONN after it, and succeeds once the
#       device is back; an allocation meant for it gets a block of device 0.
#   session_reset_regrants_dirty     (fake only) after a session reset a dirty
#       block is re-granted with its base version and written; if the version
#       moved, the dirty data is dropped and -ESTALE recorded; a clean copy is
#       kept and revalidated by a GET answered "unchanged".
#   refill_across_reset_is_void      (fake only) an ALLOC whose session ends
#       while its reply is handled reserved nothing: its blocks are not
#       used, and a stable allocation commits with a block of the new session.
#   write_failure_reported           (fake only) a write the server refuses
#       (version moved underneath) is returned by sync and recorded once for
#       ngnfs_cache_take_error in writeback mode, returned by ngnfs_txn_run in
#       stable mode, and the refused data is dropped.
#   cow_write_during_writeback       (fake only; the fake server holds writes)
#       a block of a set being written is changed without a retry or a wait;
#       the held write carries the old bytes, the newer set is sent only after
#       it completed, based on its version, with the new bytes; in stable mode
#       the second writer waits for its own set, written after the first.
#   devices_write_independently      (fake only) a stable commit on device 1
#       is written while device 0's write is held in flight; two commits on
#       device 0 meanwhile wait for that write and then share one write.
#   cow_revoke_writes_both_in_order  (fake only) another client's read during
#       that state waits; the frozen write, then the newer set (with the
#       release) are written, and only then does the reader get a = 2.
#   cow_first_write_fails            (fake only) the frozen write fails: the
#       newer set is dropped with it, never sent; sync and take_error report
#       -EIO, the cache reads the server's old contents, and in stable mode
#       both writers get -EIO.
#   read_of_block_in_flight_waits    (fake only) a transaction that reads a
#       block whose write is in flight and changes another waits for that
#       write; when it fails, the transaction runs again on the refetched
#       block, so nothing derived from the lost contents is written.
#   write_in_flight_at_reset_is_resent (fake only) a single-device write in
#       flight when its session breaks (-ENOTCONN, not applied) is granted
#       again at its base versions and written again: sync and a stable
#       writer succeed, the server has the data, no error is recorded.
#   multi_device_write_at_reset_is_resent (fake only) a two-device set whose
#       write fails with -ENOTCONN (never committed) is written again once
#       the broken session's block is granted again, with no error recorded.
#   grant_lost_under_committed_write (fake only) a two-device set commits
#       although a session reset took one block's grant meanwhile; the next
#       change of that block asks for the grant again and is written.
#   applied_write_at_reset_is_kept (fake only) a single-device write applied
#       just before its session broke (reply lost, -ENOTCONN) is recognised
#       by its bytes at the moved version: no error, the newer change made
#       during the write reaches the server, and a free it carried is not
#       sent twice.
#   release_waits_for_invalidation (fake only) a revocation whose
#       invalidation the gateway delivers later holds its RELEASE (and the
#       other client's write) until the delivery is reported, or for
#       NGNFS_CACHE_INVALIDATION_WAIT_MS when it never is.
#
# ThreadSanitizer: every cache test carries the label tsan, so the TSan pass
# of tools/ngnfs-local test (ctest -L tsan in build-tsan, see
# docs/operations.md) runs them; by hand:
#   cmake -S . -B build-tsan -DNGNFS_BUILD_FSAL=OFF -DNGNFS_FUZZ=OFF -DNGNFS_TSAN=ON
#   cmake --build build-tsan -j2
#   ctest --test-dir build-tsan -R '^cache\.' --output-on-failure
# The tests set TSAN_OPTIONS=halt_on_error=1 (NGNFS_TSAN_ENVIRONMENT) so a
# race fails the test.  The cache.real.* tests also run blockd under TSan;
# ctest/tsan.supp drops the reports inside the uninstrumented Debian RocksDB
# library (TSan cannot see its synchronisation).

add_library(ngnfs_cache_test STATIC
	    ${CMAKE_SOURCE_DIR}/libcore/blockbuf.c
	    ${CMAKE_SOURCE_DIR}/libcore/cache.c
	    ${CMAKE_SOURCE_DIR}/libcore/txn.c
	    ${CMAKE_SOURCE_DIR}/libcore/dirty.c
	    ${NGNFS_TEST_DIR}/cache/fake_client.c)
target_include_directories(ngnfs_cache_test PUBLIC ${CMAKE_SOURCE_DIR}/libcore
			   ${NGNFS_TEST_DIR}/cache)
target_link_libraries(ngnfs_cache_test PUBLIC Threads::Threads)

add_executable(test_cache_fake ${NGNFS_TEST_DIR}/cache/test_cache.c)
target_link_libraries(test_cache_fake PRIVATE ngnfs_cache_test)

set(NGNFS_CACHE_TESTS
    eviction_bounds_memory
    eviction_invalidates
    pressure_writes_back_dirty
    dirty_set_merging
    retry_leaves_no_trace
    stable_group_commit
    writeback_flush_within_interval
    revocation_writes_back_before_release
    revocation_waits_for_local_lock
    abba_transfers_conserve_total
    upgrade_contention_keeps_dirty_sets
    reclaim_timeout_sets_commit_retry)

foreach(test ${NGNFS_CACHE_TESTS} session_reset_regrants_dirty refill_across_reset_is_void
	     write_failure_reported
	     cow_write_during_writeback devices_write_independently
	     cow_revoke_writes_both_in_order cow_first_write_fails
	     read_of_block_in_flight_waits write_in_flight_at_reset_is_resent
	     multi_device_write_at_reset_is_resent grant_lost_under_committed_write
	     applied_write_at_reset_is_kept release_waits_for_invalidation)
	add_test(NAME cache.${test} COMMAND test_cache_fake ${test})
	set_tests_properties(cache.${test} PROPERTIES TIMEOUT 60 LABELS tsan
			     ENVIRONMENT "${NGNFS_TSAN_ENVIRONMENT}")
endforeach()

add_executable(test_cache_real ${NGNFS_TEST_DIR}/cache/test_cache.c)
target_compile_definitions(test_cache_real PRIVATE NGNFS_CACHE_TEST_REAL)
target_link_libraries(test_cache_real PRIVATE ngnfs_core ngnfs_test_harness)
foreach(test ${NGNFS_CACHE_TESTS} abba_two_processes restart_reclaims_dirty
	     device_away_is_try_again)
	ngnfs_add_cluster_test(NAME cache.real.${test} COMMAND test_cache_real ${test}
			       TIMEOUT 120 LABELS tsan)
endforeach()
