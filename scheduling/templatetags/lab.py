"""Template tags of the scheduling lab for pages outside it (the login page)."""

from django import template

from scheduling.views import demo_login as _demo_login

register = template.Library()


@register.simple_tag(takes_context=True)
def demo_login(context):
    """seed_demo's login while DEBUG is on and the account keeps its password (views.demo_login);
    None for a visitor already logged in, or when there is none to show."""
    user = context.get("user")
    if user is not None and user.is_authenticated:
        return None
    return _demo_login()
