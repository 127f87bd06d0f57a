/*
 * handlers.h -- every command's handler (mf_cmd_fn), for dispatch.c alone:
 * a handler is reached through the command table, never called by another
 * file (tests/test_layering.py).
 */
#ifndef MF_HANDLERS_H
#define MF_HANDLERS_H

#include "command_int.h"

int mfi_cmd_hello(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_build_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_ping(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_commit_transaction(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_abort_transaction(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_parameter(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_cluster_parameter(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_set_cluster_parameter(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_cmd_line_opts(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_server_status(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_host_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_whatsmyuri(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_connection_status(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_sasl_start(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_authenticate(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_sasl_continue(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_logout(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_create_user(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_update_user(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_user(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_all_users_from_database(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_grant_roles_to_user(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_revoke_roles_from_user(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_users_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_create_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_update_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_all_roles_from_database(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_roles_info(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_grant_privileges_to_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_revoke_privileges_from_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_grant_roles_to_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_revoke_roles_from_role(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_commands(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_end_sessions(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_kill_all_sessions(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_log(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_start_session(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_refresh_sessions(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_repl_set_get_status(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_repl_set_get_config(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_repl_set_initiate(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_test_api_version(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_profile(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_refresh_logical_session_cache_now(mf_cmd_ctx *, const bson_t *, bson_t *,
                                              mf_error *);
int mfi_cmd_shutdown(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_create(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_insert(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_count(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_database(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_collections(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_databases(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_rename_collection(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_convert_to_capped(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_clone_collection_as_capped(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_coll_stats(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_db_stats(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_validate(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_configure_fail_point(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_wait_for_fail_point(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_fsync(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_find(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_get_more(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_kill_cursors(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_distinct(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_plan_cache_clear(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_update(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_delete(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_find_and_modify(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_set_parameter(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_create_indexes(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_list_indexes(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_drop_indexes(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_coll_mod(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_explain(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);
int mfi_cmd_aggregate(mf_cmd_ctx *, const bson_t *, bson_t *, mf_error *);

#endif /* MF_HANDLERS_H */
