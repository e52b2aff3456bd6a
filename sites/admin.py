"""Django admin for coordinators."""

from django.contrib import admin

from .models import ApiToken, Capacity, Experiment, Membership, NetworkHost, Site, StorageEndpoint


class StorageEndpointInline(admin.TabularInline):
    model = StorageEndpoint
    fields = ["url", "implementation", "kind", "tpc_modes", "rse_names"]
    extra = 0


class NetworkHostInline(admin.TabularInline):
    model = NetworkHost
    extra = 0


class CapacityInline(admin.StackedInline):
    model = Capacity
    extra = 0


@admin.register(Site)
class SiteAdmin(admin.ModelAdmin):
    list_display = ["name", "tier", "country"]
    list_filter = ["tier", "experiments"]
    search_fields = ["name"]
    filter_horizontal = ["experiments"]
    inlines = [CapacityInline, StorageEndpointInline, NetworkHostInline]

    def save_formset(self, request, form, formset, change):
        instances = formset.save(commit=False)
        for instance in instances:
            if isinstance(instance, StorageEndpoint):
                instance.set_url(instance.url)
            instance.save()
        for obj in formset.deleted_objects:
            obj.delete()
        formset.save_m2m()


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    search_fields = ["name"]


@admin.register(StorageEndpoint)
class StorageEndpointAdmin(admin.ModelAdmin):
    list_display = ["url", "site", "implementation", "kind", "host", "port"]
    list_filter = ["kind", "implementation", "scheme"]
    search_fields = ["url", "host", "site__name"]

    def save_model(self, request, obj, form, change):
        obj.set_url(obj.url)
        super().save_model(request, obj, form, change)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "role", "site", "experiment"]
    list_filter = ["role"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "user", "name", "created", "expires", "last_used", "revoked"]
    readonly_fields = ["prefix", "key_hash", "created", "last_used"]
