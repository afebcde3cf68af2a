"""ncip.tool"""
