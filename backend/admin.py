from django.contrib import admin

from backend import models


@admin.register(models.App)
class AppAdmin(admin.ModelAdmin):
    list_display = [
        "name",
        "user_friendly_name",
        "deprecated",
        "locality_scheduling",
        "min_quorum",
        "target_nresults",
        "delay_bound",
    ]
    list_filter = ["deprecated", "locality_scheduling"]
    search_fields = ["name", "user_friendly_name"]


@admin.register(models.AppVersion)
class AppVersionAdmin(admin.ModelAdmin):
    list_display = ["app", "version_num", "platform", "plan_class", "gpu_type", "avg_ncpus", "gpu_usage", "deprecated"]
    list_filter = ["app", "platform", "gpu_type", "deprecated"]
    search_fields = ["app__name", "platform", "plan_class"]


@admin.register(models.Host)
class HostAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "domain_name",
        "owner",
        "p_ncpus",
        "p_fpops",
        "gpu_type",
        "gpu_count",
        "total_credit",
        "rpc_time",
    ]
    list_filter = ["gpu_type", "os_name", "platform"]
    search_fields = ["domain_name", "owner__username"]
    raw_id_fields = ["owner"]


@admin.register(models.HostAppVersion)
class HostAppVersionAdmin(admin.ModelAdmin):
    list_display = ["host", "app_version", "max_jobs_per_day", "n_jobs_today", "consecutive_valid"]
    list_filter = ["app_version__app"]
    search_fields = ["host__domain_name"]
    raw_id_fields = ["host", "app_version"]


@admin.register(models.File)
class FileAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "nbytes", "sticky", "file_delete_state"]
    list_filter = ["kind", "sticky", "file_delete_state"]
    search_fields = ["name", "md5_cksum"]
    raw_id_fields = ["result"]


@admin.register(models.HostFile)
class HostFileAdmin(admin.ModelAdmin):
    list_display = ["host", "name", "reported_time"]
    list_filter = ["host__platform"]
    search_fields = ["name", "host__domain_name"]
    raw_id_fields = ["host"]


@admin.register(models.Workunit)
class WorkunitAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "app",
        "transition_time",
        "need_validate",
        "error_mask",
        "assimilate_state",
        "file_delete_state",
        "canonical_result",
    ]
    list_filter = ["app", "assimilate_state", "file_delete_state", "need_validate", "error_mask", "transitioner_flags"]
    search_fields = ["name"]
    raw_id_fields = ["canonical_result", "app_version", "input_files"]
    show_full_result_count = False


@admin.register(models.Result)
class ResultAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "server_state",
        "outcome",
        "validate_state",
        "client_state",
        "host",
        "report_deadline",
        "granted_credit",
    ]
    list_filter = ["app", "server_state", "outcome", "validate_state", "client_state", "file_delete_state"]
    search_fields = ["name", "workunit__name"]
    raw_id_fields = ["workunit", "host", "user", "app_version"]
    show_full_result_count = False


@admin.register(models.LifecycleEvent)
class LifecycleEventAdmin(admin.ModelAdmin):
    list_display = ["time", "actor", "workunit", "result", "host", "field", "old", "new", "detail", "reason"]
    list_filter = ["actor", "field"]
    search_fields = ["workunit__name", "result__name", "host__domain_name", "reason"]
    raw_id_fields = ["workunit", "result", "host"]
    show_full_result_count = False


@admin.register(models.DaemonStatus)
class DaemonStatusAdmin(admin.ModelAdmin):
    list_display = ["name", "enabled", "last_pass_time", "last_work_done", "passes"]
    list_filter = ["enabled"]
    search_fields = ["name"]


@admin.register(models.AssimilatedResult)
class AssimilatedResultAdmin(admin.ModelAdmin):
    list_display = ["workunit", "app", "canonical_result", "error_mask", "output_nbytes", "time"]
    list_filter = ["app"]
    search_fields = ["workunit__name", "output_md5"]
    raw_id_fields = ["workunit", "canonical_result"]
    show_full_result_count = False
