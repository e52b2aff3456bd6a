from django.apps import AppConfig


class TestbedConfig(AppConfig):
    name = "testbed"
    verbose_name = "Local grid testbed"
